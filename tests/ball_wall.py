"""A 1-D ball (1 kg, slide joint, no gravity) and a wall: the contact toy of the step
derivative tests (tests/gradients/test_ball_wall.py, hand-computed derivatives;
tests/gradients/test_differentiable_step.py, the backward pass in the default tier)."""

XML = """<mujoco>
  <option timestep="0.002" gravity="0 0 0" integrator="implicitfast"/>
  <worldbody>
    <geom name="wall" type="plane" pos="0.5 0 0" zaxis="-1 0 0" size="1 1 0.1"/>
    <body name="ball">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="1"/></actuator>
</mujoco>"""
WALL_CONTACT_X = 0.45  # ball centre (m) where its surface touches the wall
