"""Prioritized experience replay (PER) for the Q critic: ring buffer, proportional
sampling, importance weights and priority updates, all on the device."""
