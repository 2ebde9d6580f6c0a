"""How every Kafka client of memstream authenticates: one set of settings
(``MEMSTREAM_KAFKA__SECURITY_PROTOCOL``, ``__SASL_*``, ``__SSL_*``) for the Faust
worker, the reply producer, the query consumer, the admin and command-line
clients and :class:`~streams.client.MemoryClient`.

- ``PLAINTEXT`` (the default): no TLS, no authentication.
- ``SSL``: TLS; the server is checked against ``ssl_cafile`` (else the
  system's trust store), and a client certificate (``ssl_certfile`` +
  ``ssl_keyfile``, optionally ``ssl_key_password``) is presented when given.
- ``SASL_SSL`` / ``SASL_PLAINTEXT``: SASL ``PLAIN``, ``SCRAM-SHA-256`` or
  ``SCRAM-SHA-512`` with ``sasl_username`` / ``sasl_password``, over TLS or not;
  or ``OAUTHBEARER`` with the token in ``sasl_oauth_token_file``, read again at
  every (re)authentication, so whatever refreshes the token (a sidecar, a
  projected service-account token) only rewrites the file.

:meth:`KafkaSecurity.problems` lists what is missing or contradictory, so a
command or a worker stops with one clear message instead of failing to connect.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class KafkaSecurityError(ValueError):
    """The Kafka security settings cannot work (missing or contradictory values)."""


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = field(default=None, repr=False)
    oauth_token_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def problems(self) -> list[str]:
        out = []
        if self.protocol not in PROTOCOLS:
            out.append(f"security_protocol {self.protocol!r}: one of {', '.join(PROTOCOLS)}")
        if self.sasl and self.sasl_mechanism not in MECHANISMS:
            out.append(f"sasl_mechanism {self.sasl_mechanism!r}: one of {', '.join(MECHANISMS)}")
        if self.sasl and self.sasl_mechanism == "OAUTHBEARER":
            if not self.oauth_token_file:
                out.append("OAUTHBEARER needs sasl_oauth_token_file")
        elif self.sasl and not (self.username and self.password):
            out.append(f"{self.protocol} needs sasl_username and sasl_password")
        if bool(self.certfile) != bool(self.keyfile):
            out.append("a client certificate needs both ssl_certfile and ssl_keyfile")
        if not self.tls and (self.cafile or self.certfile):
            out.append(f"ssl_* files are set but security_protocol is {self.protocol}")
        return out

    def check(self) -> KafkaSecurity:
        if problems := self.problems():
            raise KafkaSecurityError("Kafka security settings: " + "; ".join(problems))
        return self

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.cafile)
        if self.certfile and self.keyfile:
            context.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
        return context

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client (producer, consumer, admin)."""
        self.check()
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.sasl and self.sasl_mechanism == "OAUTHBEARER":
            options.update(sasl_mechanism="OAUTHBEARER",
                           sasl_oauth_token_provider=self.token_provider())
        elif self.sasl:
            options.update(sasl_mechanism=self.sasl_mechanism,
                           sasl_plain_username=self.username,
                           sasl_plain_password=self.password)
        return options

    def token_provider(self) -> AbstractTokenProvider:
        assert self.oauth_token_file is not None
        return TokenFile(self.oauth_token_file)


class TokenFile(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka is untyped
    """An OAUTHBEARER token read from a file each time the client authenticates."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def token(self) -> str:
        value = (await asyncio.to_thread(Path(self.path).read_text, encoding="utf-8")).strip()
        if not value:
            raise KafkaSecurityError(f"the OAUTHBEARER token file {self.path} is empty")
        return value


PLAINTEXT = KafkaSecurity()


async def credentials_refusal(servers: list[str], security: KafkaSecurity, timeout_s: float = 10.0
                  ) -> str | None:
    """Why the first reachable broker refuses this client's credentials or TLS, or
    None (reachable and accepted, or not reachable at all: that is worth waiting
    for, a refusal is not). aiokafka only logs the cause of a failed bootstrap."""
    options = security.client_options()
    for server in servers:
        host, _, port = server.rpartition(":")
        try:
            conn = await create_conn(host, int(port), request_timeout_ms=int(timeout_s * 1000),
                                     **options)
        except ssl.SSLError as exc:
            return f"TLS with {server} failed: {exc.reason or exc}"
        except KafkaError as exc:
            if "auth" in type(exc).__name__.lower() or "sasl" in type(exc).__name__.lower():
                return f"{server} refused the credentials: {exc}"
            continue
        except (OSError, TimeoutError, ValueError):
            continue
        conn.close()
        return None
    return None
