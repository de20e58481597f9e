"""launch/python/examples/recall_gru.py: a recurrent policy of one's own, written in PyTorch, that
solves Recall-v0 (answer a cue seen 20 steps earlier: configs/recall_lstm.yaml's task) through
gearbox.run. From the source tree's root, with the gearbox command built:

    GEARBOX_BIN=build/gearbox PYTHONPATH=launch/python \\
        /opt/gearbox/python/bin/python launch/python/examples/recall_gru.py --seed 1
    (... recall_gru.py --algorithm dqn: the same memory trained as R2D2, recall_r2d2.yaml)

The module declares its recurrent state (state_size: floats a row) and its forward takes the
observations and the state and returns PPO's outputs (DQN's: q) followed by the next state. The
actors hold the state of each environment copy (zeros at an episode's start) and the learner runs
the module step by step over each chunk, so the actors and the learner compute the same forward.
gearbox.run exports it to TorchScript in the run's folder (model.pt), sets policy.model to it, and
checks its outputs on the environment's observations before any worker starts."""
import argparse
import os
import sys

import torch


class GRUMemory(torch.nn.Module):
    """A tanh layer and a GRU cell carrying the memory: what both heads below read."""

    state_size: int

    def __init__(self, obs_size=6, hidden=64):
        super().__init__()
        self.state_size = hidden
        self.torso = torch.nn.Linear(obs_size, hidden)
        self.cell = torch.nn.GRUCell(hidden, hidden)

    def memory(self, obs: torch.Tensor, state: torch.Tensor):
        return self.cell(torch.tanh(self.torso(obs)), state)


class GRUPolicy(GRUMemory):
    """PPO's actor and critic heads on the memory."""

    def __init__(self, obs_size=6, actions=4, hidden=64):
        super().__init__(obs_size, hidden)
        self.pi = torch.nn.Linear(hidden, actions)
        self.v = torch.nn.Linear(hidden, 1)
        torch.nn.init.orthogonal_(self.pi.weight, 0.01)  # near-uniform first actions
        torch.nn.init.zeros_(self.pi.bias)

    def forward(self, obs: torch.Tensor, state: torch.Tensor):
        h = self.memory(obs, state)
        return self.pi(h), self.v(h), h


class GRUQ(GRUMemory):
    """DQN's head on the same memory: Q-values for the four answers, then the next state."""

    def __init__(self, obs_size=6, actions=4, hidden=64):
        super().__init__(obs_size, hidden)
        self.q = torch.nn.Linear(hidden, actions)

    def forward(self, obs: torch.Tensor, state: torch.Tensor):
        h = self.memory(obs, state)
        return self.q(h), h


def main(argv=None):
    """Runs GRUPolicy on configs/recall_lstm.yaml (N = 20), or GRUQ on configs/recall_r2d2.yaml
    with --algorithm dqn, and prints what the run reports."""
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--algorithm", choices=("ppo", "dqn"), default="ppo")
    parser.add_argument("--config", help="default: configs/recall_lstm.yaml (ppo), "
                        "configs/recall_r2d2.yaml (dqn)")
    parser.add_argument("--run-root", default="runs")
    args = parser.parse_args(argv)
    import gearbox  # noqa: PLC0415 (after the arguments: --help needs no command)
    dqn = args.algorithm == "dqn"
    config = args.config or os.path.join(here, "..", "..", "..", "configs",
                                         "recall_r2d2.yaml" if dqn else "recall_lstm.yaml")
    torch.manual_seed(args.seed)
    r = gearbox.run(config, model=GRUQ() if dqn else GRUPolicy(),
                    overrides={"experiment.seed": args.seed,
                               "experiment.name": "recall_gru_r2d2" if dqn else "recall_gru",
                               "experiment.run_root": args.run_root})
    s = r.summary
    print(f"{r.run_dir}: {s['exit_reason']}, solved {s['solved']}, {s['env_steps']} env steps, "
          f"{s['wall_seconds']:.1f} s")
    return 0 if s["solved"] else 1


if __name__ == "__main__":
    sys.exit(main())
