"""A stand-in simulated endpoint, served as ``simstub://`` through pyserial's URL handlers."""
