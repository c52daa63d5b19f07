"""The installed vLLM: its engine arguments, importing it lazily, and the environment a result was measured on."""
