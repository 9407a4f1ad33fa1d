"""Shipped files (MJCF models, G1 motion clips, trained policies): package data that the
build maps into the wheel as ``bcg_envs.assets`` (``pyproject.toml``); find them with
``bcg_envs.envs.resources.ASSETS``."""
