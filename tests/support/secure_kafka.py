"""A Kafka broker of the test's own with secured listeners, and its certificates.

The certificates (a CA, the broker's for ``127.0.0.1``/``localhost``, a client's)
are generated with ``cryptography``. The broker runs in KRaft mode from the
jars of :mod:`streams.devtools.embedded_broker`, with listeners

- ``SASL_SSL``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SCRAM users created at
  storage-format time, PLAIN users in the listener's JAAS configuration) and
  OAUTHBEARER (Kafka's unsecured-token validator: a JWT with ``alg: none``);
- ``SSL`` requiring a client certificate signed by the CA;
- ``INTERNAL`` plaintext between broker and controller only.

It is started and stopped by its own pid.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from streams.devtools.embedded_broker import (
    LOG4J,
    free_port,
    kafka_jars,
    new_cluster_id,
    port_open,
)

USER, PASSWORD = "memstream", "s3cret-pw"


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: Path  # PKCS#8 key followed by the certificate (Kafka's PEM keystore)
    client_cert: Path
    client_key: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Name | None,
          signer: rsa.RSAPrivateKey, *, ca: bool = False,
          san: list[x509.GeneralName] | None = None) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert("memstream-test-ca", ca_key, None, ca_key, ca=True)
    server_key, client_key = _key(), _key()
    server = _cert("localhost", server_key, ca.subject, ca_key, san=[
        x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client = _cert("memstream-client", client_key, ca.subject, ca_key)
    pem = serialization.Encoding.PEM
    pkcs8 = serialization.PrivateFormat.PKCS8
    plain = serialization.NoEncryption()
    certs = Certs(folder / "ca.pem", folder / "server.pem", folder / "client.pem",
                  folder / "client.key")
    certs.ca.write_bytes(ca.public_bytes(pem))
    certs.server.write_bytes(server_key.private_bytes(pem, pkcs8, plain) + server.public_bytes(pem))
    certs.client_cert.write_bytes(client.public_bytes(pem))
    certs.client_key.write_bytes(client_key.private_bytes(pem, pkcs8, plain))
    return certs


def unsecured_jwt(subject: str, lifetime_s: int = 3600) -> str:
    """A token Kafka's unsecured OAUTHBEARER validator accepts (no signature)."""
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")
    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


class SecureKafka:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.certs = make_certs(workdir / "certs")
        self.internal, self.controller = free_port(), free_port()
        self.sasl_ssl, self.ssl = free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def properties(self) -> str:
        jaas_plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                      f'user_{USER}="{PASSWORD}";')
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        c = self.certs
        return "\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller}",
            f"listeners=INTERNAL://127.0.0.1:{self.internal},"
            f"CONTROLLER://127.0.0.1:{self.controller},SASL_SSL://127.0.0.1:{self.sasl_ssl},"
            f"SSL://127.0.0.1:{self.ssl}",
            f"advertised.listeners=INTERNAL://127.0.0.1:{self.internal},"
            f"SASL_SSL://127.0.0.1:{self.sasl_ssl},SSL://127.0.0.1:{self.ssl}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=INTERNAL",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL_SSL:SASL_SSL,SSL:SSL",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common."
            "security.oauthbearer.OAuthBearerLoginModule required;",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas_plain}",
            f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={scram}",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={c.server}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={c.ca}",
            "listener.name.ssl.ssl.client.auth=required",
            f"log.dirs={self.workdir / 'data'}", "num.partitions=1",
            "auto.create.topics.enable=false", "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0", ""])

    def start(self) -> SecureKafka:
        lib = kafka_jars()
        props = self.workdir / "server.properties"
        props.write_text(self.properties())
        (self.workdir / "log4j.properties").write_text(
            LOG4J.format(log=self.workdir / "server.log"))
        java = ["java", "-Xms128m", "-Xmx512m",
                f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                "-cp", f"{lib}/*"]
        scram = [f"SCRAM-SHA-{n}=[name={USER},password={PASSWORD}]" for n in (256, 512)]
        subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
                        "-c", str(props), *(a for s in scram for a in ("--add-scram", s))],
                       check=True, stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen([*java, "kafka.Kafka", str(props)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        log = self.workdir / "server.log"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"secured broker exited: {log.read_text()[-2000:]}")
            if port_open(self.sasl_ssl) and log.exists() and (
                    "Kafka Server started" in log.read_text(errors="replace")):
                return self
            time.sleep(0.3)
        raise TimeoutError("secured broker did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def env(self, protocol: str = "SASL_SSL", mechanism: str = "SCRAM-SHA-512",
            password: str = PASSWORD) -> dict[str, str]:
        """memstream's settings for one of the listeners."""
        port = self.sasl_ssl if protocol == "SASL_SSL" else self.ssl
        env = {"MEMSTREAM_KAFKA__BROKER": f"kafka://127.0.0.1:{port}",
               "MEMSTREAM_KAFKA__SECURITY_PROTOCOL": protocol,
               "MEMSTREAM_KAFKA__SSL_CAFILE": str(self.certs.ca)}
        if protocol == "SASL_SSL" and mechanism == "OAUTHBEARER":
            token = self.workdir / "oauth.token"
            token.write_text(unsecured_jwt(USER))
            env.update({"MEMSTREAM_KAFKA__SASL_MECHANISM": mechanism,
                        "MEMSTREAM_KAFKA__SASL_OAUTH_TOKEN_FILE": str(token)})
        elif protocol == "SASL_SSL":
            env.update({"MEMSTREAM_KAFKA__SASL_MECHANISM": mechanism,
                        "MEMSTREAM_KAFKA__SASL_USERNAME": USER,
                        "MEMSTREAM_KAFKA__SASL_PASSWORD": password})
        else:
            env.update({"MEMSTREAM_KAFKA__SSL_CERTFILE": str(self.certs.client_cert),
                        "MEMSTREAM_KAFKA__SSL_KEYFILE": str(self.certs.client_key)})
        return env
