"""singa.config: a value an environment variable does not accept raises ConfigError (also a
ValueError) whose message names the variable, the value and the values it accepts; every value
the message names is accepted."""

from __future__ import annotations

import pytest
from singa import config
from singa.errors import ConfigError, SingaError

BOOL = "expected 1, true, yes or on (enable), or 0, false, no or off (disable)"
BOOL_OK = ["1", "true", "yes", "on", "0", "false", "no", "off", "TRUE", " on "]

# name -> (a value it refuses, what the message says it expects, values it accepts)
REFUSED = {
    "SINGA_STRICT_PLUGINS": ("maybe", BOOL, BOOL_OK),
    "SINGA_TRACE_PLUGINS": ("2", BOOL, BOOL_OK),
    "SINGA_CUDA_TF32": ("tf32", BOOL, BOOL_OK),
    "SINGA_CUDA_GRAPHS": ("captured", BOOL, BOOL_OK),
    "SINGA_GRAPH_FUSE": ("fused", BOOL, BOOL_OK),
    "SINGA_DIST_NO_ABORT_HOOK": ("please", BOOL, BOOL_OK),
    "SINGA_LOG_LEVEL": ("loud", "expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL (any case)",
                        ["DEBUG", "info", "Warning", "ERROR", "critical"]),
    "SINGA_CUDA_INIT_SIZE": ("1GiB", "expected a whole number (e.g. 0 or 512)", ["0", "512"]),
    "SINGA_CUDA_BATCHNORM": ("cudnn", "expected 'auto', 'graph' or 'shared'",
                             ["auto", "graph", "shared"]),
    "SINGA_GRAPH_RECOMPUTE": ("sometimes", "expected auto, 1 (always) or 0 (never)",
                              ["auto", "1", "0"]),
    "SINGA_DIST_TIMEOUT": ("soon", "expected a number of seconds >= 0 (0: no limit)",
                           ["0", "30", "2.5"]),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_value_is_a_config_error_naming_variable_value_and_choices(name, clean_env):
    bad, expected, _ = REFUSED[name]
    clean_env.setenv(name, bad)
    with pytest.raises(ConfigError) as info:
        config.get(name)
    assert isinstance(info.value, SingaError) and isinstance(info.value, ValueError)
    assert str(info.value) == (f"environment variable {name}={bad!r} is invalid: {expected}. "
                               f"Set {name} to an expected value, or unset it for the default")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_every_value_the_message_names_is_accepted(name, clean_env):
    for good in REFUSED[name][2]:
        clean_env.setenv(name, good)
        config.get(name)


def test_except_value_error_still_catches_it(clean_env):
    clean_env.setenv("SINGA_DIST_TIMEOUT", "-1")
    with pytest.raises(ValueError, match="SINGA_DIST_TIMEOUT='-1'"):
        config.get("SINGA_DIST_TIMEOUT")


@pytest.mark.parametrize("name", sorted(set(config.ENV_VARS) - set(REFUSED)))
def test_the_other_variables_accept_any_value(name):
    """Every variable outside REFUSED takes free text (a device string, a list of names):
    a variable whose parser can refuse a value belongs in REFUSED, with its message."""
    parse = config.ENV_VARS[name].parse
    for raw in ("", "x", "maybe", "-1", "a, b,,c", "cuda:9"):
        parse(raw)
