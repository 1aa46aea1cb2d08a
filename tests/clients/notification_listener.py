"""A stock oslo.messaging notification listener, as an OpenStack consumer of Ironic's versioned
notifications runs it, pointed at Ferrum's exchange and topic.

Usage: notification_listener.py <rabbit:// transport URL> <exchange> <topic>

Prints {"ready": true} once its queues are declared and bound, then one JSON line per
notification it is handed (the priority its endpoint method was called for, and the
publisher_id, event_type, payload, metadata and context oslo.messaging decoded), until its
standard input closes. Nothing here decodes the wire format itself: oslo.messaging does.
"""

import json
import sys
import threading

import oslo_messaging
from oslo_config import cfg


def main():
    url, exchange, topic = sys.argv[1:4]
    conf = cfg.ConfigOpts()
    conf(args=[], project="ferrum-notification-listener", default_config_files=[],
         default_config_dirs=[])
    transport = oslo_messaging.get_notification_transport(conf, url=url)
    lock = threading.Lock()

    def record(priority, ctxt, publisher_id, event_type, payload, metadata):
        line = json.dumps({
            "priority": priority,
            "publisher_id": publisher_id,
            "event_type": event_type,
            "payload": payload,
            "metadata": metadata,
            "ctxt": ctxt,
        })
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            record("info", ctxt, publisher_id, event_type, payload, metadata)

        def error(self, ctxt, publisher_id, event_type, payload, metadata):
            record("error", ctxt, publisher_id, event_type, payload, metadata)

    targets = [oslo_messaging.Target(topic=topic, exchange=exchange)]
    listener = oslo_messaging.get_notification_listener(
        transport, targets, [Endpoint()], executor="threading")
    # One worker thread: the endpoint sees notifications in the order they were delivered (the
    # default pool would call it from many threads at once).
    listener.start(override_pool_size=1)
    with lock:
        sys.stdout.write(json.dumps({"ready": True}) + "\n")
        sys.stdout.flush()
    sys.stdin.read()
    listener.stop()
    listener.wait()
    transport.cleanup()


if __name__ == "__main__":
    main()
