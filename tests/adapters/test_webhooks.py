"""Webhooks: each alert exactly once, also across a receiver's temporary failure."""

from __future__ import annotations

import collections
import logging

import pytest
from fastapi import FastAPI, Request, Response

from adapters.webhooks import Target, WebhookPublisher, alert_text
from monitor import Monitor, RunConfig
from monitor.config import ALERT_KINDS, WebhookSettings
from monitor.service.service import Service
from monitor.stores.records import StoredEvent
from tests.helpers import eventually, serving
from tests.services import free_port


class Receiver:
    """A webhook endpoint that is down (503) for its first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.received: collections.Counter[str] = collections.Counter()
        self.texts: list[str] = []
        self.alerts: list[tuple[str, str]] = []  # (run, kind)
        self.app = FastAPI()

        @self.app.post("/hook")
        async def hook(request: Request) -> Response:
            self.calls += 1
            if self.calls <= self.failures:
                return Response(status_code=503)
            self.received[request.headers["idempotency-key"]] += 1
            body = await request.json()
            self.texts.append(body["text"])
            self.alerts.append((body["scorio"]["run"], body["scorio"]["kind"]))
            return Response(status_code=200)


def clear_trials(run: str) -> list[dict[str, object]]:
    return [
        {
            "run": run,
            "model": model,
            "question": q,
            "trial": t,
            "correct": model == "good",
        }
        for model in ("good", "bad", "also-bad")
        for q in range(4)
        for t in range(30)
    ]


@pytest.mark.slow
async def test_each_alert_arrives_exactly_once_after_the_receiver_recovers() -> None:
    receiver = Receiver(failures=3)
    async with serving(receiver.app) as base:
        monitor = Monitor()
        monitor.configure(
            RunConfig(run="r", question_count=4, max_trials_per_question=30)
        )
        target = Target(url=f"{base}/hook", kinds=frozenset(ALERT_KINDS), runs=None)
        async with Service(monitor, publishers=[WebhookPublisher([target])]) as service:
            await service.call(lambda: monitor.ingest(clear_trials("r")))

            async def delivered() -> bool:
                return ("r", "ranking_stable") in receiver.alerts

            await eventually(delivered, timeout_s=20)
            expected = [e for e in monitor.events_after("r") if e.kind in ALERT_KINDS]
    assert receiver.calls > receiver.failures
    assert sorted(receiver.received) == sorted(f"r:{e.seq}" for e in expected)
    assert set(receiver.received.values()) == {1}
    assert all(text.startswith("r: ") for text in receiver.texts)


async def test_per_run_webhooks_and_run_filters() -> None:
    receiver = Receiver(failures=0)
    async with serving(receiver.app) as base:
        monitor = Monitor()
        monitor.configure(
            RunConfig(
                run="mine",
                question_count=4,
                max_trials_per_question=30,
                webhooks=[f"{base}/hook"],
            )
        )
        monitor.configure(
            RunConfig(run="other", question_count=4, max_trials_per_question=30)
        )
        publisher = WebhookPublisher([], lambda run: monitor.config(run).webhooks)
        async with Service(monitor, publishers=[publisher]) as service:
            await service.call(
                lambda: monitor.ingest(clear_trials("mine") + clear_trials("other"))
            )

            async def stable() -> bool:
                return ("mine", "ranking_stable") in receiver.alerts

            await eventually(stable, timeout_s=20)
    assert {run for run, _ in receiver.alerts} == {"mine"}


def test_alert_texts_read_as_sentences() -> None:
    resolved = StoredEvent(
        1,
        "aime25",
        "pair_resolved",
        "x",
        {"a": "m1", "b": "m2", "z": 3.2, "rho": 0.9993},
        0.0,
    )
    tie = StoredEvent(
        2,
        "aime25",
        "pair_unresolvable",
        "y",
        {"a": "m4", "b": "m5", "z": 0.1, "rho": 0.54},
        0.0,
    )
    assert alert_text(resolved) == "aime25: m1 ranks above m2 (z = 3.20, rho = 0.9993)"
    assert "statistical tie at this budget" in alert_text(tie)


async def test_webhook_urls_never_reach_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "T000/B000/s3cr3t-slack-path"
    receiver = Receiver(failures=1000)
    async with serving(receiver.app) as base:
        monitor = Monitor()
        monitor.configure(
            RunConfig(run="r", question_count=4, max_trials_per_question=30)
        )
        targets = [
            Target(
                url=f"{base}/hook?token={secret}",
                kinds=frozenset(ALERT_KINDS),
                runs=None,
                max_attempts=1,
            ),
            Target(
                url=f"http://user:pw-{len(secret)}@127.0.0.1:{free_port()}/{secret}",
                kinds=frozenset(ALERT_KINDS),
                runs=None,
                max_attempts=1,
            ),
        ]
        with caplog.at_level(logging.WARNING):
            async with Service(monitor, publishers=[WebhookPublisher(targets)]) as s:
                await s.call(lambda: monitor.ingest(clear_trials("r")))

                async def gave_up() -> bool:
                    return caplog.text.count("gave up") >= 2

                await eventually(gave_up, timeout_s=20)
    assert "answered 503" in caplog.text and "failed" in caplog.text
    assert secret not in caplog.text and f"pw-{len(secret)}" not in caplog.text
    assert "http://127.0.0.1" in caplog.text


def test_a_reopened_model_is_an_event_kind_webhooks_can_ask_for_and_read() -> None:
    settings = WebhookSettings(
        url="http://127.0.0.1:9/hook", events=["model_reopened", "pair_equivalent"]
    )
    assert settings.events == ["model_reopened", "pair_equivalent"]
    reopened = StoredEvent(
        seq=7,
        run="r",
        kind="model_reopened",
        subject='["m03", 1]',
        payload={"model": "m03", "joiners": ["late"], "reopening": 1},
        ts=0.0,
    )
    assert alert_text(reopened) == "r: m03 needs trials again (late joined)"
