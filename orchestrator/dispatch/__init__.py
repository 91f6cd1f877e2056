"""The tool-call pipeline: one middleware per module (see `middleware`), its policy, attempts and replay."""
