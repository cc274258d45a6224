"""perfdoctor.symptoms"""
