"""The bridge's last shrinking pass only tries step lists a client could have issued."""

from pymc_resume.bridge.fuzzing.shrink import minimize, well_formed

START = {"action": "start", "thread": 0, "crash": None}
UPDATE = {"action": "update", "thread": 0, "value": -1}
FORK = {"action": "fork", "thread": 0, "checkpoint": 0, "intent": "replay", "value": None}


def test_a_thread_is_started_before_anything_else_is_done_to_it():
    assert well_formed([START, UPDATE])
    assert not well_formed([UPDATE])
    assert well_formed([START, FORK, {**START, "thread": 1}])
    assert not well_formed([START, {**START, "thread": 1}])  # no fork made thread 1
    assert not well_formed([START, FORK, {**UPDATE, "thread": 1}])  # the fork never started


def test_minimize_never_drops_the_start_a_later_step_needs():
    class Seen:
        clauses = {"checkpoint-validity": "invalid state persisted"}

    def replay(steps):  # "violated" whenever the invalid update is there
        return Seen() if UPDATE in steps else None

    steps, violation = minimize(
        [START, {**START, "crash": {"stage": 1, "when": "after-execute"}}, UPDATE],
        "checkpoint-validity",
        replay,
    )
    assert steps == [START, UPDATE] and violation is not None


def test_a_repro_of_a_race_is_replayed_until_it_reproduces(tmp_path):
    from bridge_test_adapters import EveryOtherTimeAdapter

    from pymc_resume.bridge.repro.replay import replay_repro
    from pymc_resume.model.bounds import load_bounds

    document = {
        "adapter": "bridge_test_adapters:EveryOtherTimeAdapter",
        "adapter_options": {},
        "bounds": load_bounds("small").as_json(),
        "clause": "checkpoint-validity",
        "steps": [START, UPDATE],
    }
    # replay_repro builds one adapter to check the options, then one per replay: the replays
    # here get adapters 3 (correct), then 5 (correct) and 6 (faulty).
    EveryOtherTimeAdapter.counter = tmp_path / "built"
    EveryOtherTimeAdapter.counter.write_text("1")
    allowed = (document["adapter"],)  # a user adapter: replayed only when allowed
    once = replay_repro(document, attempts=1, allowed=allowed)
    assert not once.reproduces and once.attempts == 1
    twice = replay_repro({**document, "replay_attempts": 2}, allowed=allowed)
    assert twice.reproduces and twice.attempt == 2


def test_a_repro_whose_steps_kill_or_run_processes_together_allows_replays():
    from pymc_resume.bridge.fuzzing.races import may_race

    killed = {**START, "crash": {"stage": 1, "when": "after-execute"}}
    together = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    assert not may_race([START, UPDATE])
    assert may_race([killed, UPDATE]) and may_race([START, together])


def test_a_liveness_failure_is_shrunk_and_recorded_with_the_shortest_lease(tmp_path):
    from pymc_resume.bridge.fuzzing.fuzz import Target, clause_repro
    from pymc_resume.bridge.hosting.registry import factory
    from pymc_resume.bridge.repro.replay import load_repro, replay_steps
    from pymc_resume.model.bounds import load_bounds

    bounds, spec = load_bounds("default"), "bridge_test_adapters:LeasedAdapter"
    builder = factory(spec, {"fault": "stuck-claim"})
    assert builder.info.shortest_lease == {"lease_seconds": 0.1}
    stuck = [
        START,
        UPDATE,
        {"action": "resume", "thread": 0, "value": 1, "crash": {"stage": 3, "when": "before-execute"}},
    ]
    violation = replay_steps(builder, bounds, stuck, only="liveness")
    result = clause_repro("liveness", [violation], Target(spec, builder.info, bounds, 1, tmp_path))
    assert result.verdict == "violated" and result.repro_steps == 2  # the update is not needed
    assert load_repro(result.repro)["adapter_options"]["lease_seconds"] == 0.1
