"""Several API server processes in front of the same engine ranks (`api_server_count`)."""
