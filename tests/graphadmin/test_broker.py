"""The filesystem broker (graphadmin/broker.py): consumers racing producers never take a partial message."""

import threading

from kombu import Connection

from graphadmin.broker import Transport


def _connection(folder):
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={"data_folder_in": str(folder), "data_folder_out": str(folder), "polling_interval": 0},
    )


def test_messages_are_whole_when_consumers_race_producers(tmp_path):
    total, producers, consumers = 1500, 3, 3
    received, failures = [], []
    lock = threading.Lock()
    done = threading.Event()

    def produce(start):
        with _connection(tmp_path) as conn:
            queue = conn.SimpleQueue("race")
            for i in range(start, total, producers):
                queue.put({"i": i, "pad": "x" * 2000})
            queue.close()

    def consume():
        with _connection(tmp_path) as conn:
            queue = conn.SimpleQueue("race")
            while not done.is_set():
                try:
                    message = queue.get(timeout=0.05)
                except queue.Empty:
                    continue
                except Exception as exc:  # a partial file fails to decode here
                    with lock:
                        failures.append(repr(exc))
                    continue
                message.ack()
                with lock:
                    received.append(message.payload["i"])
                    if len(received) == total:
                        done.set()
            queue.close()

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    threads += [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    done.wait(timeout=120)
    done.set()
    for t in threads:
        t.join(timeout=30)
    assert failures == []
    assert sorted(received) == list(range(total))
    assert not [p for p in tmp_path.iterdir() if p.suffix in {".msg", ".tmp"}]
