from bcg_envs.mujoco_backend.benchmark import benchmark

benchmark()
