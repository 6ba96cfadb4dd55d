"""Frame descriptions: the source of truth of every frame, the built-in ones included.

``loader`` reads and checks a TOML description (one error naming the file,
line and key), ``model`` holds its values, ``schema`` makes its construct
schema, ``can`` its CAN messages and signal overlays, ``names`` the names
generated code may take; ``builtin`` loads the shipped descriptions
(``protocols/frames/*.toml``) as a user's file is loaded. Nothing here
imports the engine: a description is read and checked before anything is
built from it.
"""
