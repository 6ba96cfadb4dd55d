"""Host applications for the seed robots: the SCARA arm and the fish's system client."""
