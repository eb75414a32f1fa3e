"""The step's replay order (SPEC §1 step 7): every draw of step t sees the replay as of step t's start, the
step's B transitions go in after its last priority update (drawable from step t + 1), a slot drawn and then
overwritten in one step keeps the insert's max priority, and the run's first step inserts before it draws;
the kernels (sim backend) and the NumPy references agree on it over several steps."""
import numpy as np
import pytest

from alpharl import target
from alpharl.config import TrainConfig
from alpharl.cuda_kernels.replay.per import META_CURSOR, META_SIZE
from alpharl.lobster.sample import load_embedded
from alpharl.trainer import IntegratedTrainer

MARKET = load_embedded()


def _cfg(**kw):
    base = dict(b=4, backend="numpy", minibatch=8, replay_capacity=8, seed=3, k_max=2)
    return TrainConfig(**(base | kw))


def _rows(obs, obs_next) -> set[bytes]:
    """Each transition's (s, s') as one key (the observations are continuous: no two transitions share one)."""
    return {np.concatenate((a, b)).tobytes() for a, b in zip(np.asarray(obs), np.asarray(obs_next))}


def _record(tr: IntegratedTrainer) -> list[dict]:
    """Every draw and insert of tr's replay from now on, in call order, with the step it ran in."""
    rp, log = tr.ops.replay, []
    sample, insert = rp.sample, rp.insert

    def host(arr):
        return rp._to_host(arr)

    def logged_sample(isv, m=None, gate=None, stream=None):
        mb = sample(isv, m, gate, stream)
        log.append({"op": "draw", "step": tr.steps_done, "size": int(host(rp.meta)[META_SIZE]),
                    "rows": _rows(host(mb.obs), host(mb.obs_next)), "idx": set(host(mb.idx).tolist())})
        return mb

    def logged_insert(obs, action, reward, done, obs_next, stream=None):
        cursor = int(host(rp.meta)[META_CURSOR])
        insert(obs, action, reward, done, obs_next, stream)
        n = action.shape[0]
        log.append({"op": "insert", "step": tr.steps_done, "rows": _rows(host(obs), host(obs_next)),
                    "slots": set(((cursor + np.arange(n)) % rp.capacity).tolist())})

    rp.sample, rp.insert = logged_sample, logged_insert
    return log


def _ops(log, op, step):
    return [e for e in log if e["op"] == op and e["step"] == step]


def test_a_step_draws_from_the_replay_as_of_its_start():
    """Step t's transitions are in no draw of step t (t >= 1; the replay as of the step's start: its size
    excludes them, and in the full ring their slots still hold older transitions) and are drawn from step
    t + 1; the first step, on an empty replay, inserts before it draws."""
    tr = IntegratedTrainer(_cfg(replay_capacity=16), MARKET)
    log = _record(tr)
    steps = 8
    tr.run(steps)
    B, cap = tr.B, tr.ops.replay.capacity
    inserted = [_ops(log, "insert", t) for t in range(steps)]
    assert all(len(ins) == 1 for ins in inserted)
    assert len(set.union(*(ins[0]["rows"] for ins in inserted))) == steps * B  # every key its own transition
    assert [e["op"] for e in log if e["step"] == 0][0] == "insert"
    assert all(d["size"] == B for d in _ops(log, "draw", 0))
    drawn_next = set()
    for t in range(1, steps):
        draws = _ops(log, "draw", t)
        assert draws and all(d["size"] == min(t * B, cap) for d in draws)
        assert not any(d["rows"] & inserted[t][0]["rows"] for d in draws), f"step {t} drew its own transitions"
        assert [e["op"] for e in log if e["step"] == t][-1] == "insert"
        if t + 1 < steps:
            drawn_next |= set.union(*(d["rows"] for d in _ops(log, "draw", t + 1))) & inserted[t][0]["rows"]
    assert drawn_next, "no step drew the transitions of the step before (they carry the max priority)"


def _check_overwritten_slots(tr: IntegratedTrainer, log: list[dict], step: int) -> int:
    """After ``step``: the slots it inserted hold its transitions at the max priority, also those it drew
    (and wrote a priority back to) before overwriting them; returns how many such slots it drew."""
    rp = tr.ops.replay
    priority, pmax = rp._to_host(rp.priority), rp._to_host(rp.pmax)[0]
    (ins,) = _ops(log, "insert", step)
    slots = sorted(ins["slots"])
    np.testing.assert_array_equal(priority[slots], np.full(len(slots), pmax, np.float32))
    assert _rows(rp._to_host(rp.obs_s)[slots], rp._to_host(rp.obs_s2)[slots]) == ins["rows"]
    return len(ins["slots"] & set.union(*(d["idx"] for d in _ops(log, "draw", step))))


def test_a_slot_drawn_and_overwritten_in_one_step_keeps_the_inserts_max_priority():
    """A full ring of 2 B slots: each step overwrites the oldest B, some of which it drew; their priority after
    the step is the running max (the insert's, after the write-back), not the drawn transition's loss."""
    tr = IntegratedTrainer(_cfg(replay_capacity=8), MARKET)
    log = _record(tr)
    overwritten_drawn = 0
    for t in range(6):
        tr.step()
        overwritten_drawn += _check_overwritten_slots(tr, log, t) if t >= 1 else 0
    assert overwritten_drawn > 0, "no step drew a slot it then overwrote"


@pytest.mark.slow
@pytest.mark.skipif(target.on_simulator() is False, reason="the sim backend needs the CUDA simulator")
def test_steps_with_a_full_replay_numpy_and_kernels_agree():
    """Two steps on a ring of one slot (B = 1): the first inserts, then draws its own transition; the second
    draws the first's (the replay as of its start), writes its priority back, then overwrites the slot, which
    keeps the insert's max priority. The kernels (sim backend) and the NumPy references agree on every draw,
    the stored transitions and the priorities."""
    kw = dict(b=1, minibatch=1, replay_capacity=1, k_max=1)
    ref = IntegratedTrainer(_cfg(**kw), MARKET, hidden=16)
    dev = IntegratedTrainer(_cfg(backend="sim", **kw), MARKET, hidden=16)
    logs = {tr: _record(tr) for tr in (ref, dev)}
    for tr in (ref, dev):
        tr.run(2)
        log = logs[tr]
        assert [(e["op"], e["step"]) for e in log] == [("insert", 0), ("draw", 0), ("draw", 1), ("insert", 1)]
        assert log[2]["rows"] == log[0]["rows"] and log[2]["idx"] == log[3]["slots"] == {0}
        _check_overwritten_slots(tr, log, 1)
    sr, sd = ref.state_dict(), dev.state_dict()
    for k in ("replay.sampler_state", "replay.mb_idx", "replay.meta", "replay.action", "prng"):
        np.testing.assert_array_equal(sd[k], sr[k], err_msg=k)
    for k in ("replay.priority", "replay.pmax", "replay.obs_s", "replay.obs_s2", "replay.reward",
              "replay.mb_weight", "replay.mb_obs_s"):
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), np.asarray(sr[k], np.float64), rtol=2e-3,
                                   atol=1e-5, err_msg=k)
