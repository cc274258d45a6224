"""perfdoctor.engine"""
