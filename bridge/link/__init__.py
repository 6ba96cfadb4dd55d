"""The link: serial transports by URL, the URL allow-list, pty pairs, the hardware
lifecycle and the action-frame link. The only room that opens a port."""
