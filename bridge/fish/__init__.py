"""The robot fish of the patent: free-action behaviour, main controller, servo modules."""
