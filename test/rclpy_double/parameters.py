"""rclpy.parameter and the parameter half of rclpy.node.Node, after rclpy 3.3.15's semantics:
a type inferred from the default (``[]`` infers BYTE_ARRAY), statically typed unset parameters,
overrides applied at declaration with a type check, and the matching exceptions."""

from __future__ import annotations

import array
from enum import Enum
from typing import Any


class ParameterException(Exception):
    pass


class ParameterNotDeclaredException(ParameterException):
    pass


class ParameterAlreadyDeclaredException(ParameterException):
    pass


class InvalidParameterTypeException(ParameterException):
    pass


class ParameterUninitializedException(ParameterException):
    pass


class Parameter:
    class Type(Enum):
        NOT_SET = 0
        BOOL = 1
        INTEGER = 2
        DOUBLE = 3
        STRING = 4
        BYTE_ARRAY = 5
        BOOL_ARRAY = 6
        INTEGER_ARRAY = 7
        DOUBLE_ARRAY = 8
        STRING_ARRAY = 9

        @classmethod
        def from_parameter_value(cls, value: Any) -> Parameter.Type:
            if value is None:
                return cls.NOT_SET
            for kind, python in ((cls.BOOL, bool), (cls.INTEGER, int), (cls.DOUBLE, float)):
                if isinstance(value, python):
                    return kind
            if isinstance(value, str):
                return cls.STRING
            if isinstance(value, (list, tuple, array.array)):
                for kind, python in (
                    (cls.BYTE_ARRAY, bytes),
                    (cls.BOOL_ARRAY, bool),
                    (cls.INTEGER_ARRAY, int),
                    (cls.DOUBLE_ARRAY, float),
                    (cls.STRING_ARRAY, str),
                ):
                    if all(isinstance(v, python) for v in value):
                        return kind
            raise TypeError(f"The given value is not one of the allowed types '{value}'.")

    def __init__(self, name: str, type_: Parameter.Type | None = None, value: Any = None) -> None:
        if type_ is None:
            type_ = Parameter.Type.from_parameter_value(value)
        self._name = name
        self._type_ = type_
        self._value = value

    @property
    def name(self) -> str:
        return self._name

    @property
    def type_(self) -> Parameter.Type:
        return self._type_

    @property
    def value(self) -> Any:
        return self._value


class ParameterStore:
    """Mixed into the double's Node."""

    def _init_parameters(self, overrides: list[Parameter] | None) -> None:
        self._parameters: dict[str, Parameter] = {}
        self._descriptors: dict[str, Any] = {}
        # Same private attribute name as rclpy 3.3 (node.py: self._parameter_overrides).
        self._parameter_overrides = {p.name: p for p in overrides or ()}

    def declare_parameter(
        self,
        name: str,
        value: Any = None,
        descriptor: Any = None,
        ignore_override: bool = False,
    ) -> Parameter:
        from . import MSGS

        descriptor = descriptor if descriptor is not None else MSGS["ParameterDescriptor"]()
        if name in self._parameters:
            raise ParameterAlreadyDeclaredException([name])
        if isinstance(value, Parameter.Type):
            if value == Parameter.Type.NOT_SET:
                raise ValueError(f"Cannot declare parameter {{{name}}} as NOT_SET")
            descriptor.type = value.value
            value = None
        elif value is not None and not descriptor.dynamic_typing:
            descriptor.type = Parameter.Type.from_parameter_value(value).value
        if not ignore_override and name in self._parameter_overrides:
            value = self._parameter_overrides[name].value
        parameter = Parameter(name, value=value)
        kind = parameter.type_
        static = not descriptor.dynamic_typing and kind != Parameter.Type.NOT_SET
        if static and kind.value != descriptor.type:
            raise InvalidParameterTypeException(
                f"Trying to set parameter '{name}' to {value!r} of type {kind.name}, "
                f"expecting type {Parameter.Type(descriptor.type).name}"
            )
        self._parameters[name] = parameter
        self._descriptors[name] = descriptor
        return parameter

    def has_parameter(self, name: str) -> bool:
        return name in self._parameters

    def get_parameter(self, name: str) -> Parameter:
        if name not in self._parameters:
            raise ParameterNotDeclaredException(name)
        parameter = self._parameters[name]
        if parameter.type_ == Parameter.Type.NOT_SET and not self._descriptors[name].dynamic_typing:
            raise ParameterUninitializedException(name)
        return parameter

    def get_parameter_or(self, name: str, alternative_value: Parameter | None = None) -> Parameter:
        if alternative_value is None:
            alternative_value = Parameter(name, Parameter.Type.NOT_SET)
        if name not in self._parameters:
            return alternative_value
        if self._parameters[name].type_ == Parameter.Type.NOT_SET:
            return alternative_value
        return self._parameters[name]

    def set_parameters(self, parameter_list: list[Parameter]) -> list[bool]:
        results = []
        for parameter in parameter_list:
            if parameter.name not in self._parameters:
                raise ParameterNotDeclaredException(parameter.name)
            descriptor = self._descriptors[parameter.name]
            ok = descriptor.dynamic_typing or parameter.type_.value == descriptor.type
            if ok:
                self._parameters[parameter.name] = parameter
            results.append(ok)
        return results
