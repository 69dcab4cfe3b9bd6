"""``pal``: entry point and sub-command registry.

Each sub-command lives in its own module with ``register(subparsers)``; this file only wires
them together, so adding a command never touches the others.
"""

from __future__ import annotations

import argparse
import sys

from cli import (
    dataset_cmds,
    eval_cmds,
    experiment_cmds,
    generate_cmds,
    llm_cmds,
    memory_cmds,
    personamem_cmds,
    review_cmds,
    sim_cmds,
    users_cmds,
    workspace_cmds,
)

COMMAND_MODULES = [dataset_cmds, llm_cmds, memory_cmds, sim_cmds, eval_cmds, personamem_cmds, users_cmds, generate_cmds,
                   experiment_cmds, workspace_cmds, review_cmds]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pal", description="PAL Studio command line")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from backends.config import ConfigError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"configuration error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
