"""The robot fish of the patent: free-action behaviour, main controller, body, and the
action-frame payloads and host link (the simulated firmware is ``bridge.sim.models.fish``)."""
