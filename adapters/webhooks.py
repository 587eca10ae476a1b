"""Alerts to webhooks (Slack-compatible JSON) with retry and backoff.

Targets come from the service config (``[[webhooks]]``: url, event kinds,
optional runs) and from each run's own ``webhooks`` list (the default alert
kinds). Every alert is POSTed as ``{"text": <a sentence>, "scorio": <the
event>}`` with an ``Idempotency-Key: <run>:<seq>`` header. A target gets its
alerts in firing order; a failure (a non-2xx answer or no answer) is retried
with exponential backoff, so a receiver that is briefly down still gets each
alert once. After ``max_attempts`` the alert is logged and dropped.

httpx stops here: its errors become logged retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from monitor.config import ALERT_KINDS, WebhookSettings
from monitor.schema import Status, redacted_url
from monitor.service.retry import Backoff
from monitor.stores.records import StoredEvent

log = logging.getLogger(__name__)

_BACKOFF_S = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class Target:
    """One webhook URL and what it wants."""

    url: str
    kinds: frozenset[str]
    runs: frozenset[str] | None
    timeout_s: float = 5.0
    max_attempts: int = 12

    @classmethod
    def from_settings(cls, settings: WebhookSettings) -> Target:
        return cls(
            url=settings.url,
            kinds=frozenset(settings.events),
            runs=None if settings.runs is None else frozenset(settings.runs),
            timeout_s=settings.timeout_s,
            max_attempts=settings.max_attempts,
        )

    def wants(self, event: StoredEvent) -> bool:
        return event.kind in self.kinds and (
            self.runs is None or event.run in self.runs
        )


class WebhookPublisher:
    """Delivers alert events to every target that wants them."""

    def __init__(
        self,
        targets: Sequence[Target],
        run_webhooks: Callable[[str], Sequence[str]] = lambda run: (),
    ) -> None:
        self._targets = list(targets)
        self._run_webhooks = run_webhooks
        self._queues: dict[str, asyncio.Queue[tuple[Target, StoredEvent]]] = {}
        self._new_queue = asyncio.Event()

    @property
    def name(self) -> str:
        return "webhooks"

    def publish_status(self, status: Status) -> None:
        return None

    def publish_event(self, event: StoredEvent) -> None:
        targets = [target for target in self._targets if target.wants(event)]
        for url in self._run_webhooks(event.run):
            if event.kind in ALERT_KINDS:
                targets.append(Target(url=url, kinds=frozenset(ALERT_KINDS), runs=None))
        for target in targets:
            queue = self._queues.get(target.url)
            if queue is None:
                queue = self._queues[target.url] = asyncio.Queue()
                self._new_queue.set()
            queue.put_nowait((target, event))

    async def run(self) -> None:
        started: set[str] = set()
        async with httpx.AsyncClient() as client, asyncio.TaskGroup() as group:
            while True:
                for url, queue in list(self._queues.items()):
                    if url not in started:
                        started.add(url)
                        group.create_task(
                            self._deliver(client, queue),
                            name=f"webhook:{redacted_url(url)}",
                        )
                self._new_queue.clear()
                await self._new_queue.wait()

    async def _deliver(
        self,
        client: httpx.AsyncClient,
        queue: asyncio.Queue[tuple[Target, StoredEvent]],
    ) -> None:
        while True:
            target, event = await queue.get()
            backoff = Backoff(_BACKOFF_S)
            for _ in range(target.max_attempts):
                if await self._post(client, target, event):
                    break
                await asyncio.sleep(backoff.next_delay())
            else:
                log.error(
                    "gave up on %s alert %s:%d to %s after %d attempts",
                    event.kind,
                    event.run,
                    event.seq,
                    redacted_url(target.url),
                    target.max_attempts,
                )

    @staticmethod
    async def _post(
        client: httpx.AsyncClient, target: Target, event: StoredEvent
    ) -> bool:
        try:
            response = await client.post(
                target.url,
                json=slack_message(event),
                headers={
                    "Idempotency-Key": f"{event.run}:{event.seq}",
                    "X-Scorio-Event": event.kind,
                },
                timeout=target.timeout_s,
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            # httpx names the URL in some messages: a secret, so cut it out.
            message = str(exc).replace(target.url, redacted_url(target.url))
            log.warning("webhook %s failed: %s", redacted_url(target.url), message)
            return False
        if response.is_success:
            return True
        log.warning(
            "webhook %s answered %d", redacted_url(target.url), response.status_code
        )
        return False


def slack_message(event: StoredEvent) -> dict[str, object]:
    """``{"text": ..., "scorio": ...}``: Slack shows the text, tools read the event."""
    return {
        "text": alert_text(event),
        "scorio": event.document(),
    }


def alert_text(event: StoredEvent) -> str:
    """One sentence a person reads in a chat channel."""
    payload = event.payload
    run = event.run
    if event.kind in ("pair_resolved", "pair_unresolvable"):
        z, rho = payload.get("z"), payload.get("rho")
        numbers = (
            f"z = {z:.2f}, rho = {rho:.4f}"
            if isinstance(z, float) and isinstance(rho, float)
            else ""
        )
        if event.kind == "pair_resolved":
            return (
                f"{run}: {payload.get('a')} ranks above {payload.get('b')} ({numbers})"
            )
        return (
            f"{run}: {payload.get('a')} and {payload.get('b')} are a statistical tie "
            f"at this budget ({numbers})"
        )
    if event.kind == "ranking_stable":
        return f"{run}: the ranking is stable ({payload.get('trials')} trials)"
    if event.kind == "budget_exhausted":
        models = payload.get("models")
        names = ", ".join(str(m) for m in models) if isinstance(models, list) else ""
        return f"{run}: budget exhausted for {names}"
    if event.kind == "model_done":
        return f"{run}: {payload.get('model')} needs no more trials"
    if event.kind == "model_reopened":
        joiners = payload.get("joiners")
        names = ", ".join(str(m) for m in joiners) if isinstance(joiners, list) else ""
        return f"{run}: {payload.get('model')} needs trials again ({names} joined)"
    return f"{run}: {event.kind}"
