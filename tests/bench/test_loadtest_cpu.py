"""The load test's CPU per session counts each process's growth: a backend that exits during the run must not
take what it used before the run out of the role's total (the role sums it replaced read 7.7 ms of database CPU
per session after an evaluation's idle connections closed mid-run, against 26 ms measured fresh)."""

from bench.loadtest import cpu_by_process, cpu_spent


def test_an_exited_process_does_not_subtract_its_past():
    before = {("db", "101", "5"): 10.0, ("db", "102", "6"): 30.0, ("web", "200", "4"): 2.0}
    after = {("db", "101", "5"): 10.5, ("db", "103", "9"): 0.2, ("web", "200", "4"): 2.25}
    assert cpu_spent(before, after) == {"web": 0.25, "worker": 0.0, "db": 0.5 + 0.2}


def test_a_reused_pid_counts_as_a_new_process():
    before = {("worker", "300", "7"): 4.0}
    after = {("worker", "300", "8"): 0.3}
    assert cpu_spent(before, after)["worker"] == 0.3


def test_reads_this_machine():
    found = cpu_by_process()
    assert all(role in {"web", "worker", "db"} and cpu >= 0 for (role, _pid, _start), cpu in found.items())
