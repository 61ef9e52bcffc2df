"""The runtime: Session, the acompletion wrapper, the tool loop, the transcript file."""
