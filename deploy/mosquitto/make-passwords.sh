#!/bin/sh
# Write the broker's password file for the users of deploy/mosquitto/acl.
#
# Usage: MQTT_PRODUCER_PASSWORD=... MQTT_MONITOR_PASSWORD=... \
#        MQTT_READER_PASSWORD=... make-passwords.sh FILE
#
# The compose stack runs it on every start (service mosquitto-passwords),
# so changing a password in .env and restarting is enough. By hand:
#   mosquitto_passwd -c FILE producer   (prompts; -c creates the file)
#   mosquitto_passwd FILE monitor       (adds or changes a user)
# mosquitto_passwd stores salted SHA-512 hashes, never the passwords.
set -eu

file=${1:?usage: make-passwords.sh FILE}
: "${MQTT_PRODUCER_PASSWORD:?is not set}"
: "${MQTT_MONITOR_PASSWORD:?is not set}"
: "${MQTT_READER_PASSWORD:?is not set}"

umask 077
# Build next to the target and move it in place: the broker never reads a
# half-written file.
mosquitto_passwd -c -b "$file.new" producer "$MQTT_PRODUCER_PASSWORD"
mosquitto_passwd -b "$file.new" monitor "$MQTT_MONITOR_PASSWORD"
mosquitto_passwd -b "$file.new" reader "$MQTT_READER_PASSWORD"
mv "$file.new" "$file"
