"""docs/cli.md opens with a summary of every command: it names each
subcommand the CLI has, no more and no fewer."""

from __future__ import annotations

from pathlib import Path

import click

from azync_flow.cli import cli

SUMMARY = (Path(__file__).parents[2] / "docs" / "cli.md").read_text().split("```")[1]


def test_the_summary_lists_every_command_of_every_group() -> None:
    listed = {}
    for line in SUMMARY.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "azync-flow" and "|" in words[2]:
            listed[words[1]] = set(words[2].split("|"))
    groups = {
        name: set(command.commands)
        for name, command in cli.commands.items()
        if isinstance(command, click.Group)
    }
    assert listed == groups
    assert {line.split()[1] for line in SUMMARY.splitlines() if line.strip()} == set(cli.commands)
