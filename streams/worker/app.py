"""The Faust application. Agents live in the top-level ``agents`` package and
are found by autodiscovery when the worker starts."""

from __future__ import annotations

import faust

from streams.adapters.kafka.clients import kafka_security
from streams.adapters.kafka.security import KafkaSecurity
from streams.settings import get_settings
from streams.worker.faust_glue import delivery_settings

settings = get_settings()


def broker_credentials(security: KafkaSecurity) -> faust.auth.Credentials | None:
    """Faust's form of the Kafka security settings (the other clients take
    :meth:`KafkaSecurity.client_options`)."""
    security.check()
    if security.sasl and security.sasl_mechanism == "OAUTHBEARER":
        return faust.OAuthCredentials(oauth_cb=security.token_provider(),
                                      ssl_context=security.ssl_context())
    if security.sasl:
        return faust.SASLCredentials(username=security.username, password=security.password,
                                     mechanism=security.sasl_mechanism,
                                     ssl_context=security.ssl_context())
    if security.tls:
        return faust.SSLCredentials(security.ssl_context())
    return None


class App(faust.App):
    """Faust's app. Faust makes its data directory with ``mkdir(exist_ok=True)``,
    which fails when the parent is missing; the parents are made first, so any nested
    ``MEMSTREAM_KAFKA__DATA_DIR`` works (a fresh checkout has no ``.bench/``)."""

    async def on_first_start(self) -> None:
        self.conf.datadir.mkdir(parents=True, exist_ok=True)
        await super().on_first_start()


app = App(
    settings.kafka.app_id,
    broker=settings.kafka.broker,
    store="memory://",
    autodiscover=["agents"],
    origin="streams",
    topic_partitions=settings.kafka.partitions,
    topic_replication_factor=settings.kafka.replication_factor,
    topic_allow_declare=True,
    consumer_auto_offset_reset="earliest",
    broker_session_timeout=settings.kafka.session_timeout_s,
    broker_heartbeat_interval=settings.kafka.heartbeat_interval_s,
    broker_commit_interval=settings.kafka.commit_interval_s,
    producer_acks=-1,
    producer_linger_ms=5,
    producer_max_batch_size=256 * 1024,
    **delivery_settings(settings.ingest.batch_size),
    web_host=settings.web.host,
    web_bind=settings.web.host,
    web_port=settings.web.port,
    # Faust's /router (the partition layout) and /table (any tenant's session
    # state) answer without authentication
    web_router_enabled=settings.web.faust_pages,
    web_tables_enabled=settings.web.faust_pages,
    web_in_thread=False,
    broker_credentials=broker_credentials(kafka_security(settings.kafka)),
    datadir=settings.kafka.data_dir,
    table_standby_replicas=0,
    Worker="streams.worker.faust_glue:QuietWorker",
)
