"""Test servers: a pacing server, a fault server, and the llama-server build."""
