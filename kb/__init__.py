"""perfdoctor.kb"""
