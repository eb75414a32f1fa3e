"""The command list in --help and shell completion."""
from typer.testing import CliRunner

from alpharl.cli.app import app

runner = CliRunner()


def test_help_lists_every_command_with_a_line():
    r = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for cmd in ("train", "diag", "eval", "export", "slots", "bench", "data"):
        line = next((ln for ln in r.output.splitlines() if f" {cmd} " in ln), None)
        assert line is not None and len(line.split(cmd, 1)[1].strip(" │")) > 10, cmd
    r = runner.invoke(app, ["data", "--help"], env={"COLUMNS": "200"})
    assert "info" in r.output


def test_every_command_has_help():
    for cmd in (["train"], ["diag"], ["eval"], ["export"], ["slots"], ["bench"], ["data", "info"]):
        r = runner.invoke(app, [*cmd, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and "Usage" in r.output, cmd


def test_show_completion_bash(monkeypatch):
    # --show-completion detects the shell from the parent processes; fix it to bash so the test
    # does not depend on how it was started (a detached runner has no shell above it).
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    r = runner.invoke(app, ["--show-completion"], prog_name="alpharl")
    assert r.exit_code == 0, r.output
    assert "_ALPHARL_COMPLETE=complete_bash" in r.output and "complete -o default -F" in r.output


def test_completion_completes_commands_and_options():
    env = {"_ALPHARL_COMPLETE": "complete_bash", "COMP_WORDS": "alpharl di", "COMP_CWORD": "1"}
    r = runner.invoke(app, [], env=env, prog_name="alpharl")
    assert r.output.split() == ["diag"]
    env = {"_ALPHARL_COMPLETE": "complete_bash", "COMP_WORDS": "alpharl train --check", "COMP_CWORD": "2"}
    r = runner.invoke(app, [], env=env, prog_name="alpharl")
    assert r.output.split() == ["--checkpoint-every"]
