"""What the shell's environment filter withholds: the credentials a real environment holds
under names the old ``*_KEY``/``*_TOKEN`` list missed, and values that are credentials
whatever their name. Each is put in this process's environment and looked for in the output
of ``env`` run by the real shell tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextree import OverflowStore
from contextree.tools import SECRET_NAMES, ShellEnvironment, ToolContext, Workspace, shell

MISSED = {
    "DATABASE_URL": "postgresql://app:pg-pass-1@db.internal:5432/prod",
    "CONTEXTREE_PG_URL": "postgresql://ct:pg-pass-2@localhost/contextree",
    "MONGODB_URI": "mongodb+srv://admin:mongo-pass-3@cluster0.example.net/db",
    "MYSQL_PWD": "mysql-pass-4",
    "GPG_PASSPHRASE": "gpg-pass-5",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.sock-6",
    "HTTPS_PROXY": "http://corp-user:proxy-pass-7@proxy.corp:3128",
    "SENTRY_DSN": "https://sentrykey8@o123.ingest.sentry.io/456",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/webhook-9",
    "DOCKER_AUTH_CONFIG": '{"auths": {"registry.example": {"auth": "docker-10"}}}',
    "CI_JOB_JWT": "eyJhbGciOiJSUzI1NiJ9.ci-jwt-11",
    "TOKEN": "bare-token-12",
    "SECRET": "bare-secret-13",
}

# Credentials under names no pattern can know: recognised by their value.
BY_VALUE = {
    "https_proxy": "https://u:lower-proxy-14@proxy:8080",
    "UPSTREAM": "amqp://guest:amqp-pass-15@rabbit/vhost",
    "PIP_INDEX_URL": "https://__token__:pypi-16@pypi.example/simple",
    "LIBPQ_SETTINGS": "host=db user=app password=libpq-17",
    "EXPORT_HOOK": "https://storage.example/upload?sig=signed-18&exp=1",
    "MY_OPENAI": "sk-proj-" + "A" * 24 + "19",
    "DEPLOY_MATERIAL": "-----BEGIN OPENSSH PRIVATE KEY-----\nkey-20\n",
}

# What must keep passing: ordinary settings, some with names close to the patterns.
PLAIN = {
    "PWD_NOTE": "x", "OLDPWD": "/tmp", "GIT_AUTHOR_NAME": "A. Author",
    "GIT_AUTHOR_EMAIL": "a@example.com", "TOKENIZERS_PARALLELISM": "false",
    "HTTPS_PROXY_PLAIN": "http://proxy.corp:3128", "PIP_INDEX_URL_PLAIN": "https://pypi.org/simple",
    "XAUTHORITY": "/run/user/1000/xauth", "KEYTIMEOUT": "1", "LESSKEY": "/etc/lesskey",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    "LS_COLORS": "rs=0:di=01;34:*.key=01;31:*.pem=01;31",
}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))


def env_seen_by_a_command(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch,
                          variables: dict[str, str]) -> str:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return shell.run({"command": "env"}, context=ctx).content


@pytest.mark.parametrize("name", list(MISSED))
def test_each_credential_the_old_list_missed_is_withheld(
        ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    value = MISSED[name]
    out = env_seen_by_a_command(ctx, monkeypatch, {name: value})
    assert value not in out and f"{name}=" not in out
    assert not ShellEnvironment().passes(name, value)
    # by its name alone, whatever it holds; a proxy only when its URL carries a password
    assert ShellEnvironment().passes(name) is (name == "HTTPS_PROXY")


@pytest.mark.parametrize("name", list(BY_VALUE))
def test_a_credential_under_an_ordinary_name_is_withheld_by_its_value(
        ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    value = BY_VALUE[name]
    out = env_seen_by_a_command(ctx, monkeypatch, {name: value})
    assert value.splitlines()[0] not in out and f"{name}=" not in out
    assert ShellEnvironment().passes(name)  # the name alone would pass
    assert not ShellEnvironment().passes(name, value)


def test_ordinary_settings_still_pass(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    out = env_seen_by_a_command(ctx, monkeypatch, PLAIN)
    for name, value in PLAIN.items():
        assert f"{name}={value}" in out, name
    assert "PWD=" in out and "PATH=" in out


def test_allow_passes_a_withheld_variable_and_the_value_check_can_be_turned_off(
        ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", MISSED["DATABASE_URL"])
    monkeypatch.setenv("UPSTREAM", BY_VALUE["UPSTREAM"])
    allowing = ToolContext(workspace=ctx.workspace, store=ctx.store,
                           shell_env=ShellEnvironment(allow=("DATABASE_URL", "UPSTREAM")))
    out = shell.run({"command": "env"}, context=allowing).content
    assert MISSED["DATABASE_URL"] in out and BY_VALUE["UPSTREAM"] in out
    names_only = ShellEnvironment(check_values=False)
    assert names_only.passes("UPSTREAM", BY_VALUE["UPSTREAM"])
    assert not names_only.passes("DATABASE_URL", "postgresql://localhost/db")
    assert ShellEnvironment().withheld({"UPSTREAM": BY_VALUE["UPSTREAM"], "LANG": "C"}) == [
        "UPSTREAM"]


def test_the_public_list_names_the_new_patterns() -> None:
    for pattern in ("*PASS*", "*_PWD*", "*JWT*", "*_AUTH_*", "*WEBHOOK*", "*_DSN", "TOKEN",
                    "SECRET"):
        assert pattern in SECRET_NAMES
