"""tests/launch/python/test_models.py: custom PyTorch models through the gearbox package and the
command: modules whose outputs do not fit Recall-v0's spaces (logits for 3 actions of 4, a next
state of 32 floats of 64) refused by gearbox.run before any run directory exists, with
ModelMismatch naming the module and both shapes; a forward without the declared state refused
in Python; export_model's file refused the same way by `gearbox check` and `gearbox run` for a
config-only user (exit status 2, the key and the shapes); then the example's recurrent module
(launch/python/examples/recall_gru.py, a GRU cell) solving Recall N = 20 through gearbox.run,
its model.pt kept in the run directory, and the policy its verdict rests on (the checkpoint set
"solved") evaluated there again on other episodes; the example's GRU with DQN's head (GRUQ)
solving it as R2D2 (recall_r2d2.yaml: stored states, burn-in, the module stepped by the
learner).
Usage: test_models.py GEARBOX SOURCE_ROOT WORK_DIR (exits 77, skipped, without PyTorch)"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

from harness import check, finish, setup

GEARBOX, SRC, WORK = setup()
try:
    import torch
except ImportError:
    print("skipped: no PyTorch in this Python (Debian's python3-torch)")
    sys.exit(77)
import gearbox  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "launch", "python", "examples"))
from recall_gru import GRUPolicy, GRUQ  # noqa: E402

RECALL = os.path.join(SRC, "configs", "recall_lstm.yaml")
# run directories in a temporary folder, removed at exit
RUNS = tempfile.mkdtemp(prefix="gb-models-")
atexit.register(shutil.rmtree, RUNS, True)
OVER = {"experiment.run_root": RUNS}


class WrongLogits(GRUPolicy):
    """Three logits where Recall-v0 (4 symbols) has four actions."""

    def __init__(self):
        super().__init__()
        self.pi = torch.nn.Linear(64, 3)


class ShortState(torch.nn.Module):
    """Declares 64 floats of state and returns 32."""

    state_size: int

    def __init__(self):
        super().__init__()
        self.state_size = 64
        self.cell = torch.nn.GRUCell(6, 64)
        self.pi = torch.nn.Linear(64, 4)
        self.v = torch.nn.Linear(64, 1)

    def forward(self, obs: torch.Tensor, state: torch.Tensor):
        h = self.cell(obs, state)
        return self.pi(h), self.v(h), h[:, :32]


class NoStateArg(torch.nn.Module):
    """Declares state but its forward takes none."""

    state_size: int

    def __init__(self):
        super().__init__()
        self.state_size = 8
        self.pi = torch.nn.Linear(6, 4)

    def forward(self, obs: torch.Tensor):
        return self.pi(obs), obs[:, 0]


def refused(module, what):
    """gearbox.run with module raises ModelMismatch; returns its message ("" when it did not)."""
    try:
        gearbox.run(RECALL, overrides=OVER, model=module)
    except gearbox.ModelMismatch as e:
        check(e.status == 2 and e.module == type(module).__qualname__,
              f"{what}: ModelMismatch, status {e.status}, module {e.module}")
        return str(e)
    except Exception as e:  # noqa: BLE001 (any other outcome fails the check)
        check(False, f"{what}: ModelMismatch, not {type(e).__name__}: {e}")
        return ""
    check(False, f"{what}: refused")
    return ""


t0 = time.time()
msg = refused(WrongLogits(), "logits for 3 of 4 actions")
print(msg)
check("WrongLogits" in msg and "logits of shape [3, 3]" in msg and "not [3, 4]" in msg
      and "4 discrete actions" in msg, "the message names the module, actual and expected shapes")
msg = refused(ShortState(), "a next state of 32 of 64 floats")
check("ShortState" in msg and "next state of shape [3, 32]" in msg and "not [3, 64]" in msg,
      f"the message names the state's shapes: {msg.splitlines()[-1] if msg else ''}")
check(not os.path.exists(RUNS) or not any(os.scandir(RUNS)),
      "no run directory for a refused module")
check(time.time() - t0 < 60, f"two refusals took {time.time() - t0:.1f} s")
try:
    gearbox.run(RECALL, overrides=OVER, model=NoStateArg())
    check(False, "a forward without the declared state is refused")
except TypeError as e:
    check("NoStateArg" in str(e) and "forward(obs, state)" in str(e), f"refused: {e}")

# export_model: a fitting module's overrides; a config-only user of a misfit file
good = os.path.join(WORK, "good.pt")
sets = gearbox.export_model(GRUPolicy(), good, config=RECALL)
check(os.path.isfile(good) and sets["policy.model.torchscript_state"] == 64
      and sets["policy.model.type"] == "torchscript", f"export_model checked: {sets}")
try:
    gearbox.export_model(WrongLogits(), os.path.join(WORK, "w.pt"), config=RECALL)
    check(False, "export_model with a config refuses a misfit module")
except gearbox.ModelMismatch as e:
    check("WrongLogits" in str(e), "export_model's ModelMismatch names the module")
bad = os.path.join(WORK, "bad.pt")
bad_sets = gearbox.export_model(WrongLogits(), bad)  # no config: not checked
cli = [a for k, v in bad_sets.items() for a in ("--set", f"{k}={v}")]
for cmd in ("check", "run"):
    extra = ["--run-dir", os.path.join(WORK, "cli_run")] if cmd == "run" else []
    p = subprocess.run([GEARBOX, cmd, RECALL] + cli + extra, capture_output=True, text=True,
                       check=False)
    check(p.returncode == 2 and "policy.model.torchscript" in p.stderr and bad in p.stderr
          and "not [3, 4]" in p.stderr,
          f"gearbox {cmd} of the file: status {p.returncode}: {p.stderr.strip()}")
check(not os.path.exists(os.path.join(WORK, "cli_run", "config.yaml")),
      "gearbox run started nothing")

# the example's GRU module solves Recall N = 20 through gearbox.run
torch.manual_seed(1)  # the module's first weights, as the example's --seed
r = gearbox.run(RECALL, overrides={**OVER, "experiment.seed": 1, "experiment.max_seconds": 240},
                model=GRUPolicy())
s = r.summary
e = s.get("evaluation") or {}
print(f"recall_gru seed 1: {s['exit_reason']}, {s['env_steps']} env steps, "
      f"{s['wall_seconds']:.1f} s, solved_by {s.get('solved_by')}: evaluation at "
      f"{e.get('env_steps')} env steps of checkpoint step {e.get('checkpoint_step')} "
      f"(of {s['train_steps']}): {e.get('return_mean')}")
check(s["solved"] is True, f"the GRU module solved Recall N = 20: {s['exit_reason']}")
model_pt = os.path.join(os.path.abspath(r.run_dir), "model.pt")
with open(os.path.join(r.run_dir, "config.yaml"), encoding="utf-8") as f:
    text = f.read()
check(os.path.isfile(model_pt) and model_pt in text and "torchscript_state: 64" in text,
      "the run keeps its model.pt and its config names it")
# the policy the verdict rests on, kept as the set "solved", played again on other episodes
ev = gearbox.evaluate(r.run_dir, episodes=20, deterministic=True, checkpoint="solved", seed=7)
check(ev["checkpoint_step"] == e.get("checkpoint_step") and ev["return_mean"] >= 0.9,
      f"the solved policy evaluated from its run directory: step {ev['checkpoint_step']}, "
      f"{ev['return_mean']}")
# the last checkpoint (the trainers went on while the verdict's evaluation played): reported
last = gearbox.evaluate(r.run_dir, episodes=20, deterministic=True)
print(f"the last checkpoint (step {last['checkpoint_step']}): {last['return_mean']}")

# the same memory as R2D2: a TorchScript module's state stored with each chunk, warmed up over
# the burn-in rows and stepped by the learner row by row
torch.manual_seed(1)
r = gearbox.run(os.path.join(SRC, "configs", "recall_r2d2.yaml"), model=GRUQ(),
                overrides={**OVER, "experiment.seed": 1, "experiment.max_seconds": 240})
s = r.summary
print(f"recall_gru r2d2 seed 1: {s['exit_reason']}, {s['env_steps']} env steps, "
      f"{s['wall_seconds']:.1f} s, solved_by {s.get('solved_by')}")
check(s["solved"] is True and s.get("solved_by") == "evaluation",
      f"GRUQ solved Recall N = 20 with DQN (R2D2): {s['exit_reason']}")
ev = gearbox.evaluate(r.run_dir, episodes=20, deterministic=True, checkpoint="solved", seed=7)
check(ev["return_mean"] >= 0.9, f"its solved policy evaluated again: {ev['return_mean']}")
finish()
