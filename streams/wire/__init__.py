"""Every byte-level contract: record bodies on each topic, header names, the
Spring reply headers, decoding with a reason for each rejection, and the
JSON Schemas exported from them. Imports no adapter and no framework.
"""
