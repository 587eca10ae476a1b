"""The compose stack's pieces running natively from deploy/'s files.

Broker and Redis from deploy/'s configs, the workers as ``serve`` processes
from deploy/monitor.toml with the environment compose gives them (from
env.example), and a real Prometheus from deploy/prometheus/ scraping them:
a producer's trials are split between the workers and counted once, and
every metric and query of the dashboard and the alert rules works there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.deployment import (
    SHARED_TRIALS,
    as_prometheus_query,
    collect,
    dashboard_expressions,
    deploy_broker,
    deploy_redis,
    mqtt_client,
    poll,
    prometheus_server,
    queried_by_dashboard,
    queried_by_rules,
    rule_expressions,
    selectors,
    wait_for_log,
    worker,
    worker_services,
)
from tests.helpers import trial_events, trial_results

# Every test here takes seconds (the inner loop is -m "not slow").
pytestmark = pytest.mark.slow

RUN = "bench"


@dataclass(frozen=True)
class Stack:
    """The compose stack's pieces running from deploy/'s files."""

    broker_port: int
    workers: dict[str, str]
    prometheus: str
    results: np.ndarray


async def publish_trials(port: int, results: np.ndarray) -> None:
    async with mqtt_client(port, "producer") as producer:
        for event in trial_events(results):
            await producer.publish(
                f"scorio/{RUN}/trials", json.dumps(event).encode(), qos=1
            )
        await producer.publish(f"scorio/{RUN}/trials", b"{not json", qos=1)


def counted(base: str) -> int:
    response = httpx.get(f"{base}/runs/{RUN}/status")
    return int(response.json()["trials"]) if response.status_code == 200 else -1


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Broker, Redis, the workers and Prometheus; the trials already counted."""
    folder = tmp_path_factory.mktemp("stack")
    results = trial_results(5, models=3, questions=6, trials=4)
    with ExitStack() as services:
        broker_port = services.enter_context(deploy_broker(folder / "broker"))
        redis_port = services.enter_context(deploy_redis(folder / "redis"))
        workers = {
            name: services.enter_context(worker(name, folder, redis_port, broker_port))
            for name in worker_services()
        }
        for name in workers:
            wait_for_log(folder / f"{name}.log", f"subscribed to {SHARED_TRIALS}")
        asyncio.run(publish_trials(broker_port, results))
        poll(
            lambda: all(counted(base) == results.size for base in workers.values()),
            timeout_s=60,
        )
        prometheus = services.enter_context(
            prometheus_server(folder / "prometheus", workers)
        )
        yield Stack(broker_port, workers, prometheus, results)


def ingested_by(base: str) -> float:
    families = text_string_to_metric_families(httpx.get(f"{base}/metrics").text)
    return next(
        sample.value
        for family in families
        for sample in family.samples
        if sample.name == "scorio_trials_ingested_total"
    )


def test_the_workers_split_the_trials_between_them(stack: Stack) -> None:
    assert len(stack.workers) == 2
    assert all(ingested_by(base) > 0 for base in stack.workers.values())


def test_the_workers_count_every_trial_once_between_them(stack: Stack) -> None:
    assert sum(ingested_by(base) for base in stack.workers.values()) == (
        stack.results.size
    )
    assert all(counted(base) == stack.results.size for base in stack.workers.values())


async def test_a_reader_gets_the_retained_status_of_the_run(stack: Stack) -> None:
    async with mqtt_client(stack.broker_port, "reader") as reader:
        await reader.subscribe(f"scorio/{RUN}/status", qos=1)
        messages = await collect(reader)
    payload = messages[0].payload
    assert isinstance(payload, bytes) and messages[0].retain
    status = json.loads(payload)
    assert status["run"] == RUN
    assert len(status["models"]) == 3


def prometheus_get(stack: Stack, path: str, **parameters: str) -> object:
    """The ``data`` of a Prometheus HTTP API answer, which must be a success."""
    response = httpx.get(f"{stack.prometheus}{path}", params=parameters)
    body = response.json()
    assert body["status"] == "success", body
    data: object = body["data"]
    return data


def prometheus_query(stack: Stack, query: str) -> list[object]:
    """The result vector of an instant query."""
    data = prometheus_get(stack, "/api/v1/query", query=query)
    assert isinstance(data, dict) and isinstance(data["result"], list), data
    return data["result"]


def test_prometheus_scrapes_every_worker(stack: Stack) -> None:
    def all_up() -> bool:
        data = prometheus_get(stack, "/api/v1/targets")
        assert isinstance(data, dict)
        targets = [
            t for t in data["activeTargets"] if t["labels"]["job"] == "scorio-monitor"
        ]
        return len(targets) == len(stack.workers) and all(
            t["health"] == "up" for t in targets
        )

    poll(all_up)


def test_prometheus_has_every_metric_the_dashboard_and_rules_query(
    stack: Stack,
) -> None:
    wanted = queried_by_dashboard() | queried_by_rules()

    def missing() -> set[str]:
        names = prometheus_get(stack, "/api/v1/label/__name__/values")
        assert isinstance(names, list)
        return wanted - set(names)

    poll(lambda: not missing())


def test_every_dashboard_query_runs_and_its_selectors_find_series(
    stack: Stack,
) -> None:
    queries = [
        as_prometheus_query(e, run=RUN, model="m0") for e in dashboard_expressions()
    ]
    for query in queries:
        prometheus_query(stack, query)
    wanted = {selector for query in queries for selector in selectors(query)}

    def empty() -> list[str]:
        return [
            selector
            for selector in sorted(wanted)
            if not prometheus_query(stack, selector)
        ]

    poll(lambda: not empty())


def test_every_alert_rule_evaluates_without_error(stack: Stack) -> None:
    def rules() -> list[dict[str, str]]:
        data = prometheus_get(stack, "/api/v1/rules")
        assert isinstance(data, dict)
        return [rule for group in data["groups"] for rule in group["rules"]]

    poll(lambda: all(rule["health"] != "unknown" for rule in rules()))
    assert {rule["name"]: rule["health"] for rule in rules()} == {
        name: "ok" for name in rule_expressions()
    }
