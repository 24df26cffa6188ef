"""Private plumbing of operator_runtime: tensor views, devices, streams."""
