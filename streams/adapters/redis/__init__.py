"""Redis: the hot copy of each conversation and its Lua scripts."""
