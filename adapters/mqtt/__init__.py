"""MQTT: the trial source (on paho-mqtt) and the status and event publisher.

One package per outside system; nothing of aiomqtt or paho leaves it.
"""

from adapters.mqtt.publisher import MqttPublisher, event_json
from adapters.mqtt.source import MqttSource, run_of, trials_topic
from adapters.mqtt.takeovers import SESSION_TAKEN_OVER, Takeovers

__all__ = [
    "SESSION_TAKEN_OVER",
    "MqttPublisher",
    "MqttSource",
    "Takeovers",
    "event_json",
    "run_of",
    "trials_topic",
]
