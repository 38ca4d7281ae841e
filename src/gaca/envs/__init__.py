"""Text environments (no model code here): the protocol, the families by name, the pool, the driver.

    from gaca.envs import make_env, EnvPool, env_spec, play_episodes
    env = make_env("alfworld", split="train", num_games=60)

Each family registers a typed config (a subclass of ``EnvConfig``) and a factory named as
``"module:function"``, imported on first use, so a user without ALFWorld installed can still use
WebShop. ``EnvPool`` steps many environments in lock-step (in this process or on worker
processes); ``play_episodes`` is the one loop that steps episodes for every caller.
"""

from __future__ import annotations

from gaca.envs.alfworld.config import AlfworldConfig
from gaca.envs.base import INFO_KEYS, TextEnv
from gaca.envs.config import ENVIRONMENTS, EnvConfig, EnvFamily, register_env
from gaca.envs.spec import EnvSpec, env_spec, make_env, named_spec, prepare_envs
from gaca.envs.webshop.config import WebShopConfig

register_env("alfworld", AlfworldConfig, "gaca.envs.alfworld:make", prepare="gaca.envs.alfworld:prepare")
register_env("webshop", WebShopConfig, "gaca.envs.webshop:make", names="gaca.envs.webshop:product_ids")

from gaca.envs.episodes import (  # noqa: E402  (the pool and driver use the registry above)
    Agent,
    Decision,
    Episode,
    EpisodeBatch,
    ReplayAgent,
    Step,
    Turn,
    play_episodes,
)
from gaca.envs.pool import EnvPool, StepOutcome  # noqa: E402

__all__ = [
    "ENVIRONMENTS",
    "INFO_KEYS",
    "Agent",
    "AlfworldConfig",
    "Decision",
    "EnvConfig",
    "EnvFamily",
    "EnvPool",
    "EnvSpec",
    "Episode",
    "EpisodeBatch",
    "ReplayAgent",
    "Step",
    "StepOutcome",
    "TextEnv",
    "Turn",
    "WebShopConfig",
    "env_spec",
    "make_env",
    "named_spec",
    "play_episodes",
    "prepare_envs",
    "register_env",
]
