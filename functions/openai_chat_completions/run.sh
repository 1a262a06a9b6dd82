#!/bin/sh
# The streaming entry in AWS (infra/constructs/streaming.py): the Lambda Web Adapter, as the exec
# wrapper (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap), runs this file as the function's handler; it
# starts the streaming routes' ASGI app (citegate.api.stream_app) under uvicorn on
# 127.0.0.1:$AWS_LWA_PORT. The layers are under /opt/python; handler.py is beside this file.
PYTHONPATH="/opt/python${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m citegate.api.stream_app
