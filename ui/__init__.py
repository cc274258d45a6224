"""perfdoctor.ui"""
