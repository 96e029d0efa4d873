"""Studies built on the simulator: the DeepSeek-V4 production prediction and the validation against real engines."""
