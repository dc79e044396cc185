"""The client commands of `python -m app.cli`: they talk to a running server over HTTP (httpx).

`connection` finds the server and the key and turns HTTP errors into messages; `output` prints tables and JSON
lines; `progress` writes a job's one-line status; `events` reads a job's Server-Sent Events; `watch` follows a
job (a rich progress bar on a terminal, plain lines otherwise). The commands are grouped by resource: `jobs`,
`models`, `datasets`, `translations`; each module's `register` adds its commands to the parser.
"""
