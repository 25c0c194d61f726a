"""The filesystem broker (graphadmin/runtime/broker.py): consumers racing producers never take a partial message."""

import threading

from kombu import Connection

from graphadmin.runtime.broker import Transport


def _connection(folder):
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder / "control"),
            "polling_interval": 0,
        },
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


def test_a_queue_being_declared_never_shows_a_partial_binding_table(tmp_path, monkeypatch):
    """kombu's binder creates the exchange's table file empty, then locks and writes it: a producer
    reading it in between (a web process publishing while a worker declares its queues) failed to
    decode it and lost the message. The binder is held just before it takes its lock; a read then
    must see a whole table (here: none yet), not an empty file."""
    from kombu.transport import filesystem

    plain_lock = filesystem.lock
    in_window, resume = threading.Event(), threading.Event()
    binder = {}

    def lock(file, flags):
        if flags == filesystem.LOCK_EX and threading.current_thread() is binder.get("thread"):
            in_window.set()
            resume.wait(timeout=30)
        return plain_lock(file, flags)

    monkeypatch.setattr(filesystem, "lock", lock)
    failures = []

    def declare():
        try:
            with _connection(tmp_path) as conn:
                conn.SimpleQueue("jobs").close()
        except Exception as exc:
            failures.append(repr(exc))

    binder["thread"] = threading.Thread(target=declare)
    binder["thread"].start()
    try:
        assert in_window.wait(timeout=30)
        with _connection(tmp_path) as conn:
            table = conn.default_channel.get_table("jobs")  # raised JSONDecodeError on kombu's own binder
        assert table == []
    finally:
        resume.set()
        binder["thread"].join(timeout=30)
    assert failures == []
    with _connection(tmp_path) as conn:
        assert [q.queue for q in conn.default_channel.get_table("jobs")] == ["jobs"]
