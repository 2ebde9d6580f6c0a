"""The Kafka security settings as client options: table-driven."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from streams.adapters.kafka.security import KafkaSecurity, KafkaSecurityError


@pytest.mark.parametrize(("security", "problem"), [
    (KafkaSecurity(), None),
    (KafkaSecurity("SASL_SSL", "SCRAM-SHA-512", "u", "p"), None),
    (KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "u", "p"), None),
    (KafkaSecurity("SSL"), None),
    (KafkaSecurity("SASL_SSL", "SCRAM-SHA-256", "u", None),
     "needs sasl_username and sasl_password"),
    (KafkaSecurity("SASL_SSL", "GSSAPI", "u", "p"), "sasl_mechanism 'GSSAPI'"),
    (KafkaSecurity("TLS"), "security_protocol 'TLS'"),
    (KafkaSecurity("SSL", certfile="c.pem"), "both ssl_certfile and ssl_keyfile"),
    (KafkaSecurity("PLAINTEXT", cafile="ca.pem"), "security_protocol is PLAINTEXT"),
    (KafkaSecurity("SASL_SSL", "OAUTHBEARER", oauth_token_file="/t"), None),
    (KafkaSecurity("SASL_SSL", "OAUTHBEARER"), "needs sasl_oauth_token_file"),
])
def test_problems(security: KafkaSecurity, problem: str | None) -> None:
    problems = security.problems()
    if problem is None:
        assert problems == []
        security.check()
    else:
        assert any(problem in p for p in problems), problems
        with pytest.raises(KafkaSecurityError, match="Kafka security settings"):
            security.client_options()


def test_client_options() -> None:
    assert KafkaSecurity().client_options() == {"security_protocol": "PLAINTEXT"}
    sasl = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "u", "p").client_options()
    assert sasl == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                    "sasl_plain_username": "u", "sasl_plain_password": "p"}
    tls = KafkaSecurity("SASL_SSL", "PLAIN", "u", "p").client_options()
    assert isinstance(tls["ssl_context"], ssl.SSLContext)
    assert tls["ssl_context"].check_hostname and tls["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert "hunter2" not in repr(KafkaSecurity("SASL_SSL", "PLAIN", "u", "hunter2",
                                               key_password="hunter2"))


async def test_the_oauth_token_is_read_again_at_every_authentication(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    options = KafkaSecurity("SASL_PLAINTEXT", "OAUTHBEARER",
                            oauth_token_file=str(path)).client_options()
    provider = options["sasl_oauth_token_provider"]
    assert options["sasl_mechanism"] == "OAUTHBEARER" and "sasl_plain_password" not in options
    assert await provider.token() == "first"
    path.write_text("refreshed")
    assert await provider.token() == "refreshed"
    path.write_text("")
    with pytest.raises(KafkaSecurityError, match="empty"):
        await provider.token()
