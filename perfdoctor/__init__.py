"""perfdoctor: root-cause diagnosis for slow GPU inference and training."""
