"""deploy/: the broker, Redis, Prometheus, Grafana and compose files, by their tools.

There is no Docker engine here, so each file is checked by the real program
that reads it (tests/deploy/deployment.py adapts ports and paths):
mosquitto with deploy/mosquitto/ (its password file made by
make-passwords.sh from env.example): logins and the ACL, judged by what
clients receive; redis-server started as compose starts it; promtool on the
Prometheus config and rules and the rules' unit tests; the dashboard's and
the rules' metric names against a running monitor's /metrics; the Grafana
provisioning; the compose file against the Compose Specification schema.
The stack as a whole: test_stack.py; the image: test_image.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import httpx
import pytest
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from adapters.prometheus import metrics_renderer
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.deploy.deployment import (
    DASHBOARD_FILE,
    DATASOURCES_FILE,
    DEPLOY,
    PROMETHEUS_METRICS,
    PROVIDERS_FILE,
    SHARED_TRIALS,
    clean_environment,
    collect,
    compose_file,
    compose_service,
    dashboard,
    dashboard_panels,
    deploy_broker,
    deploy_redis,
    env_example,
    exported_names,
    interpolate,
    mqtt_client,
    queried_by_dashboard,
    queried_by_rules,
    replace_once,
    rule_expressions,
    worker_environment,
    worker_services,
)
from tests.helpers import eventually, serving, trial_events, trial_results
from tests.services import require_binary

RUN = "bench"


# -- mosquitto -------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The deploy broker; tests isolate themselves by run id in the topic."""
    with deploy_broker(tmp_path_factory.mktemp("deploy-broker")) as port:
        yield port


async def test_the_broker_refuses_a_client_without_a_valid_login(broker: int) -> None:
    with pytest.raises(aiomqtt.MqttError, match="Not authorized"):
        async with mqtt_client(broker, None):
            pass
    with pytest.raises(aiomqtt.MqttError, match="Not authorized"):
        async with mqtt_client(broker, "producer", "not-the-password"):
            pass


async def test_the_monitor_receives_a_producers_trial_on_its_shared_subscription(
    broker: int, prefix: str
) -> None:
    async with mqtt_client(broker, "monitor") as monitor:
        await monitor.subscribe(SHARED_TRIALS, qos=1)
        async with mqtt_client(broker, "producer") as producer:
            await producer.publish(f"scorio/{prefix}/trials", b"trial", qos=1)
        messages = await collect(monitor)
    assert [(m.topic.value, m.payload) for m in messages] == [
        (f"scorio/{prefix}/trials", b"trial")
    ]


async def test_a_producers_publish_to_a_status_topic_is_dropped(
    broker: int, prefix: str
) -> None:
    topic = f"scorio/{prefix}/status"
    async with mqtt_client(broker, "reader") as reader:
        await reader.subscribe(topic, qos=1)
        async with mqtt_client(broker, "producer") as producer:
            await producer.publish(topic, b"forged", qos=1)
        async with mqtt_client(broker, "monitor") as monitor:
            await monitor.publish(topic, b"genuine", qos=1)
        messages = await collect(reader)
    assert [m.payload for m in messages] == [b"genuine"]


async def test_a_reader_gets_the_monitors_retained_status_and_its_events(
    broker: int, prefix: str
) -> None:
    status, events = f"scorio/{prefix}/status", f"scorio/{prefix}/events"
    async with mqtt_client(broker, "monitor") as monitor:
        await monitor.publish(status, b'{"stable": true}', qos=1, retain=True)
    async with mqtt_client(broker, "reader") as reader:
        await reader.subscribe(status, qos=1)
        await reader.subscribe(events, qos=1)
        async with mqtt_client(broker, "monitor") as monitor:
            await monitor.publish(events, b'{"kind": "ranking_stable"}', qos=1)
        messages = await collect(reader)
    assert [(m.topic.value, m.payload, m.retain) for m in messages] == [
        (status, b'{"stable": true}', True),
        (events, b'{"kind": "ranking_stable"}', False),
    ]


@pytest.mark.slow
async def test_readers_get_no_trials_and_producers_no_statuses(
    broker: int, prefix: str
) -> None:
    trials, status = f"scorio/{prefix}/trials", f"scorio/{prefix}/status"
    async with (
        mqtt_client(broker, "reader") as reader,
        mqtt_client(broker, "producer") as producer,
        mqtt_client(broker, "monitor") as monitor,
    ):
        await reader.subscribe(trials, qos=1)
        await producer.subscribe(status, qos=1)
        await monitor.subscribe(trials, qos=1)
        await producer.publish(trials, b"trial", qos=1)
        await monitor.publish(status, b"status", qos=1)
        assert [m.payload for m in await collect(monitor)] == [b"trial"]
        assert await collect(reader, first_s=0.5) == []
        assert await collect(producer, first_s=0.5) == []


def test_the_compose_health_check_of_the_broker_passes(broker: int) -> None:
    require_binary("mosquitto_sub", "mosquitto-clients")
    kind, command = compose_service("mosquitto")["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    command = replace_once(
        interpolate(command, {}), "-h 127.0.0.1", f"-h 127.0.0.1 -p {broker}"
    )
    result = subprocess.run(
        ["sh", "-c", command],
        env={**clean_environment(), **env_example()},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# -- redis -----------------------------------------------------------------------


def test_redis_wants_the_password_and_keeps_every_acknowledged_write(
    tmp_path: Path,
) -> None:
    with deploy_redis(tmp_path) as port:
        anonymous = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        anonymous.close()
        url = worker_environment("monitor-1", port, 0, 0)["SCORIO_MONITOR_STORE_URL"]
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert client.config_get("maxmemory-policy") == {
            "maxmemory-policy": "noeviction"
        }
        client.close()


# -- prometheus: static checks ---------------------------------------------------


def promtool(*arguments: str, cwd: Path) -> None:
    binary = require_binary("promtool", "prometheus")
    result = subprocess.run(
        [binary, *arguments], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.services
def test_promtool_accepts_the_config_and_the_rules() -> None:
    promtool("check", "config", "prometheus.yml", cwd=DEPLOY / "prometheus")
    promtool("check", "rules", "alerts.yml", cwd=DEPLOY / "prometheus")


@pytest.mark.services
def test_the_alerts_fire_as_their_promtool_unit_tests_expect() -> None:
    promtool("test", "rules", "alerts_test.yml", cwd=Path(__file__).parent)


# -- metric names against a running monitor ------------------------------------


async def monitor_metric_names() -> set[str]:
    """Sample names on /metrics of a monitor that counted and rejected inputs."""
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor, status_interval_s=0.01) as service:
        app = create_app(
            service, HttpSettings(), metrics_renderer(lambda: service.snapshot)
        )
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            events = trial_events(trial_results(1, models=3, questions=4, trials=2))
            assert (await http.post(f"/runs/{RUN}/trials", json=events)).is_success
            await http.post(
                f"/runs/{RUN}/trials",
                content=b"{not json",
                headers={"Content-Type": "application/json"},
            )

            async def has_pairs() -> bool:
                return "scorio_pair_z{" in (await http.get("/metrics")).text

            await eventually(has_pairs, timeout_s=10)
            return exported_names((await http.get("/metrics")).text)


async def test_every_metric_the_dashboard_queries_is_on_the_monitors_metrics() -> None:
    exported = await monitor_metric_names() | PROMETHEUS_METRICS
    queried = queried_by_dashboard()
    assert sorted(queried - exported) == []
    assert {
        "scorio_model_score",
        "scorio_model_lower",
        "scorio_model_upper",
        "scorio_model_trials",
        "scorio_pair_z",
        "scorio_trials_ingested_total",
        "scorio_ingest_latency_seconds_bucket",
        "scorio_trials_rejected_total",
    } <= queried


async def test_every_metric_the_alert_rules_query_is_on_the_monitors_metrics() -> None:
    exported = await monitor_metric_names() | PROMETHEUS_METRICS
    queried = queried_by_rules()
    assert sorted(queried - exported) == []
    assert set(rule_expressions()) == {
        "ScorioRankingStable",
        "ScorioPairUnresolvable",
        "ScorioBudgetExhausted",
        "ScorioMonitorDown",
        "ScorioRejectedInputRateHigh",
    }


# -- grafana ---------------------------------------------------------------------


def test_the_dashboard_uses_the_provisioned_datasource_by_uid() -> None:
    [source] = yaml.safe_load(DATASOURCES_FILE.read_text())["datasources"]
    reference = {"type": source["type"], "uid": source["uid"]}
    panels = [p for p in dashboard_panels() if p["type"] != "row"]
    references = [p["datasource"] for p in panels]
    references += [t["datasource"] for p in panels for t in p["targets"]]
    references += [
        v["datasource"]
        for v in dashboard()["templating"]["list"]
        if v["type"] == "query"
    ]
    assert references and all(r == reference for r in references)
    assert source["url"] == "http://prometheus:9090"
    assert "prometheus" in compose_file()["services"]


def test_grafana_provisions_the_dashboard_from_the_folder_compose_mounts() -> None:
    [provider] = yaml.safe_load(PROVIDERS_FILE.read_text())["providers"]
    mounts = {
        target: (DEPLOY / source).resolve()
        for source, target, *_ in (
            volume.split(":") for volume in compose_service("grafana")["volumes"]
        )
    }
    assert mounts[provider["options"]["path"]] == DASHBOARD_FILE.parent
    assert mounts["/etc/grafana/provisioning"] == DATASOURCES_FILE.parents[1]


def test_the_dashboard_panels_have_unique_ids_and_fit_the_grid() -> None:
    panels = dashboard_panels()
    assert len({p["id"] for p in panels}) == len(panels)
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)
    assert dashboard()["uid"] == "scorio-monitor"


# -- compose ---------------------------------------------------------------------


def test_the_compose_file_matches_the_compose_specification() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(DEPLOY / "docker-compose.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_mounts_deploy_files_and_takes_its_variables_from_env_example() -> None:
    services = compose_file()["services"]
    sources = [
        volume.split(":")[0]
        for service in services.values()
        for volume in service.get("volumes", [])
        if volume.startswith("./")
    ]
    assert sources and all((DEPLOY / source).exists() for source in sources)
    text = (DEPLOY / "docker-compose.yml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{(\w+)", text))
    assert used == set(env_example())


def test_each_worker_has_its_own_client_id_and_is_scraped() -> None:
    workers = worker_services()
    environments = [worker_environment(name, 1, 2, 3) for name in workers]
    client_ids = {e["SCORIO_MONITOR_MQTT_CLIENT_ID"] for e in environments}
    assert len(workers) >= 2 and len(client_ids) == len(workers)
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    [job] = [
        j for j in prometheus["scrape_configs"] if j["job_name"] == "scorio-monitor"
    ]
    [targets] = [static["targets"] for static in job["static_configs"]]
    assert targets == [f"{name}:8000" for name in workers]
