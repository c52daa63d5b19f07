"""A live vLLM engine: the in-process session and the OpenAI server session, started with the plugin enabled."""
