"""Answers from the knowledge: ask (retrieve, answer, bind citations), the answerers, the Answer API and
its sessions, confidence, feedback.
"""
